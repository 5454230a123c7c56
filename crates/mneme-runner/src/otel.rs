//! OpenTelemetry in the runner: `mneme-otel` records and exports; this
//! module finds each span's parent among the spans open in an instance.

use std::sync::{Arc, Mutex};

use wasmtime::component::GuestTaskId;

pub use mneme_otel::*;

/// The spans open in one instance, for finding a host call's parent. Each
/// request's guest task and each stage call's guest task is bound to its
/// span; a host call made through an accessor walks its async call stack
/// (`StoreContextMut::async_call_stack`) to the youngest bound task, so
/// requests sharing an instance keep their own trees. Calls that reach the
/// host without the store (outbound HTTP, the embedding model) take the
/// innermost span still open in the instance, which is exact while it
/// serves one request at a time (D-F30).
#[derive(Default)]
pub struct Scope(Mutex<Open>);

#[derive(Default)]
struct Open {
    by_task: Vec<(GuestTaskId, SpanContext)>,
    /// Bound spans in the order they opened.
    order: Vec<SpanContext>,
}

impl Scope {
    fn open(&self) -> std::sync::MutexGuard<'_, Open> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Binds `task` (a request's or a stage call's) to `span`.
    fn bind(&self, task: GuestTaskId, span: SpanContext) {
        let mut o = self.open();
        o.by_task.push((task, span));
        o.order.push(span);
    }

    /// Unbinds what [`Scope::bind`] bound.
    fn unbind(&self, task: GuestTaskId, span: SpanContext) {
        let mut o = self.open();
        if let Some(i) = o.by_task.iter().rposition(|(t, c)| *t == task && c.span_id == span.span_id) {
            o.by_task.remove(i);
        }
        if let Some(i) = o.order.iter().rposition(|c| c.span_id == span.span_id) {
            o.order.remove(i);
        }
    }

    /// The span of the youngest of `stack` (youngest first) that is bound,
    /// else the innermost open one.
    pub fn parent(&self, stack: &[GuestTaskId]) -> Option<SpanContext> {
        let o = self.open();
        stack
            .iter()
            .find_map(|t| o.by_task.iter().rev().find(|(b, _)| b == t).map(|(_, c)| *c))
            .or_else(|| o.order.last().copied())
    }

    /// A client span for a host call that has no store to ask: under the
    /// innermost open span.
    pub fn host(&self, name: &'static str) -> Option<Span> {
        if !tracing() {
            return None;
        }
        let parent = self.parent(&[])?;
        Span::start(name, Kind::Client, Some(parent))
    }
}

/// A task bound to its span (a request's until its response ends, a stage
/// call's until it returns); unbound when dropped.
pub struct Binding {
    scope: Arc<Scope>,
    task: GuestTaskId,
    span: SpanContext,
}

impl Binding {
    pub fn new(scope: Arc<Scope>, task: GuestTaskId, span: SpanContext) -> Self {
        scope.bind(task, span);
        Self { scope, task, span }
    }
}

impl Drop for Binding {
    fn drop(&mut self) {
        self.scope.unbind(self.task, self.span);
    }
}
