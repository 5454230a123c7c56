#!/usr/bin/env bash
# Fuzzes the parsers that read outside input (docs/FUZZING.md): every
# cargo-fuzz target in fuzz/, one after another, each for the given time,
# then minimises its corpus in place (fuzz/corpus/<target>/).
#
#   scripts/fuzz.sh [seconds per target, default 600] [target ...]
#
# cargo-fuzz needs nightly features; RUSTC_BOOTSTRAP=1 unlocks them on the
# stable toolchain. One fuzzer at a time, at the lowest priority: the
# machine's cores are shared. A summary line per target goes to stdout; the
# full libFuzzer output to fuzz/logs/<target>.log.
set -euo pipefail

secs="${1:-600}"
shift || true
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root/fuzz"
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
  nice -n 10 cargo install cargo-fuzz --locked
fi

targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  mapfile -t targets < <(cargo fuzz list)
fi

# `-a`: debug assertions, so integer overflow panics too.
nice -n 10 cargo fuzz build -a
mkdir -p logs
failed=0
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t"
  rm -f fuzz-0.log
  status=0
  nice -n 19 cargo fuzz run -a "$t" -- -max_total_time="$secs" -jobs=1 -workers=1 -print_final_stats=1 \
    >"logs/$t.run.log" 2>&1 || status=$?
  # With -jobs, libFuzzer writes the job's own output to fuzz-0.log.
  if [ -f fuzz-0.log ]; then mv -f fuzz-0.log "logs/$t.log"; else cp "logs/$t.run.log" "logs/$t.log"; fi
  nice -n 19 cargo fuzz cmin -a "$t" >"logs/$t.cmin.log" 2>&1 || true
  last="$(grep -E '^#[0-9]+' "logs/$t.log" | tail -n 1)"
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "logs/$t.log" | tail -n 1)"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "logs/$t.log" | tail -n 1)"
  cov="$(sed -En 's/.* cov: ([0-9]+) ft: ([0-9]+).*/cov \1, ft \2/p' <<<"$last")"
  files="$(find "corpus/$t" -type f | wc -l)"
  size="$(du -sh --apparent-size "corpus/$t" | cut -f1)"
  crashes="$(find "artifacts/$t" -type f \( -name 'crash-*' -o -name 'oom-*' -o -name 'timeout-*' \) 2>/dev/null | wc -l)"
  echo "$t: ${execs:-?} execs, ${rate:-?} exec/s, ${cov:-?}, corpus $files files ($size), artifacts $crashes, exit $status"
  [ "$status" -eq 0 ] || failed=1
done
exit "$failed"
