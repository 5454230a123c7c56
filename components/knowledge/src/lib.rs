//! The `knowledge` stage (`mneme:knowledge`): the principal's judgement as
//! knowledge entries (001 seed). [`ingest`] runs the ingest jobs' store
//! side, [`read`] the entries, patterns, retrieval and the vault search,
//! over the rows of [`entries`]. The rules are `mneme-knowledge`'s.

spin_sdk::wit_bindgen::generate!({
    path: ["../../wit/types", "../../wit/knowledge"],
    world: "mneme:knowledge/stage-knowledge",
    runtime_path: "::spin_sdk::wit_bindgen::rt",
    with: {
        "mneme:types/types@0.1.0": mneme_types::mneme::types::types,
        "mneme:types/knowledge@0.1.0": mneme_types::knowledge,
    },
    generate_all,
});

mod documents;
mod entries;
mod ingest;
mod read;

use exports::mneme::knowledge::knowledge::{EmbedderCheck, Guest, VectorIndexStep};
use mneme_types::knowledge::{
    Enqueued, EntryDetail, EntryPage, EntryTimeline, IngestJob, IngestReport, JobView, JudgedJob, KnowledgeType,
    Mirror, NewDocument, PatternView, Prepared, Retrieved, SearchHit, SearchMode, Transcript,
};
use mneme_types::{GivenBack, StageError, VaultFile};

struct Stage;

impl Guest for Stage {
    async fn enqueue(source: Transcript, now_ms: u64) -> Result<Enqueued, StageError> {
        Ok(ingest::enqueue(source.into(), now_ms).await?)
    }
    async fn job(id: String) -> Result<JobView, StageError> {
        Ok(ingest::job(&id).await?)
    }
    async fn claim(now_ms: u64, lease_ms: u64) -> Result<Option<IngestJob>, StageError> {
        Ok(ingest::claim(now_ms, lease_ms).await?)
    }
    async fn prepare(candidates: Vec<String>, merge_threshold: f32) -> Result<Vec<Prepared>, StageError> {
        Ok(ingest::prepare(&candidates, merge_threshold).await?)
    }
    async fn apply(job: JudgedJob) -> Result<IngestReport, StageError> {
        Ok(ingest::apply(job).await?.into())
    }
    async fn fail(
        job_id: String,
        claim: String,
        error: String,
        retry: bool,
        now_ms: u64,
    ) -> Result<GivenBack, StageError> {
        Ok(ingest::fail(&job_id, &claim, &error, retry, now_ms).await?)
    }
    async fn list(
        limit: u32,
        offset: u32,
        kind: Option<KnowledgeType>,
        pattern: Option<String>,
        include_superseded: bool,
    ) -> Result<EntryPage, StageError> {
        let listing = read::Listing { limit, offset, kind: kind.map(Into::into), pattern, include_superseded };
        Ok(read::list(listing).await?)
    }
    async fn get(id: String) -> Result<EntryDetail, StageError> {
        Ok(read::get(&id).await?)
    }
    async fn markdown(id: String) -> Result<Mirror, StageError> {
        Ok(read::markdown(&id).await?)
    }
    async fn vault() -> Result<Vec<VaultFile>, StageError> {
        Ok(read::vault().await?)
    }
    async fn patterns() -> Result<Vec<PatternView>, StageError> {
        Ok(read::pattern_list().await?)
    }
    async fn timeline(since_day: i64) -> Result<EntryTimeline, StageError> {
        Ok(read::timeline(since_day).await?)
    }
    async fn retrieve(query: String, k: u32, mode: SearchMode, now_ms: u64) -> Result<Retrieved, StageError> {
        Ok(read::retrieve(&query, k as usize, mode.into(), now_ms).await?)
    }
    async fn search(
        query: String,
        k: u32,
        mode: SearchMode,
        corpora: Vec<String>,
        cache_embedding: bool,
    ) -> Result<Vec<SearchHit>, StageError> {
        let q = read::Query { q: query, k: k as usize, mode: mode.into(), corpora, cache_embedding };
        Ok(read::search(q).await?)
    }
    async fn add_documents(documents: Vec<NewDocument>, now_ms: u64) -> Result<Vec<String>, StageError> {
        Ok(documents::add(documents, now_ms).await?)
    }
    async fn delete_document(id: String) -> Result<(), StageError> {
        Ok(documents::delete(&id).await?)
    }

    async fn embedder() -> Result<EmbedderCheck, StageError> {
        let started = std::time::Instant::now();
        let v = mneme_substrate::embed("Is the embedding model loaded?")?;
        Ok(EmbedderCheck {
            model: "all-minilm-l6-v2".into(),
            dimension: v.len() as u32,
            took_us: started.elapsed().as_micros() as u64,
        })
    }

    async fn index_vectors(now_ms: u64) -> Result<Vec<VectorIndexStep>, StageError> {
        let steps = read::index_vectors(now_ms).await?;
        Ok(steps
            .into_iter()
            .map(|(corpus, step)| match step {
                Ok(s) => VectorIndexStep {
                    corpus: s.corpus,
                    trained: s.trained,
                    lists: s.lists,
                    moved: s.moved,
                    flat: s.flat,
                    error: None,
                },
                Err(e) => VectorIndexStep {
                    corpus: corpus.into(),
                    trained: false,
                    lists: 0,
                    moved: 0,
                    flat: 0,
                    error: Some(e.into()),
                },
            })
            .collect())
    }
}

export!(Stage);
