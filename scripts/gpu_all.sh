#!/usr/bin/env bash
# The prepared GPU visit: scripts/gpu_fast.py, then the official EAGLE code against ours on the GPU.
#
# Issue 21's whole GPU visit in device calls (docs/gpu/README.md): the pinned transformers from .whl/, then the
# steps named in $STEPS (default "fast peer big"), each under its own time limit, so a later one still runs when
# an earlier one overruns:
#   fast  scripts/gpu_fast.py (static cache + CUDA graphs, bf16, the 8B-shaped target; at most $FAST_S, 420 s)
#   peer  the official EAGLE code against ours on the shipped and the weak pair, ours with static caches + CUDA
#         graphs (scripts/peer_official.py --static, the official code installed offline from .whl-peer/;
#         at most $PEER_S, 150 s)
#   big   the same race on a random Llama-3.1-8B-shaped pair in bf16 (`peer_official.py --pair big`, 16 GB
#         written to the machine's disk first; at most $BIG_S, 300 s): the official round against ours
# All three together pass a device call's 600 s, so a visit is two calls back to back (the machine stays warm):
#   STEPS="fast peer" scripts/gpu_all.sh        then        STEPS=big scripts/gpu_all.sh
# Reports and logs go to $OUT.
#
#   scripts/gpu_all.sh --smoke    # here, on the CPU: every step with tiny sizes (the peer from the usual venv)
set -u
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then sed -n "2,/^set -u/p" "$0" | sed "\$d; s/^# \{0,1\}//"; exit 0; fi
cd "$(dirname "$0")/.."
OUT=${OUT:-out/gpu}
STEPS=${STEPS:-fast peer big}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
if [ "${1:-}" = "--smoke" ]; then
  fast=(--smoke) peer=(--device cpu --repeats 1 --max-new-tokens 16 --pair shipped --static)
  big=(--device cpu --repeats 1 --max-new-tokens 16 --pair big --big-shape smoke --static)
else
  fast=(--seconds "${FAST_SECTIONS_S:-300}") peer=(--device cuda --repeats 2 --pair both --wheels .whl-peer --static)
  big=(--device cuda --repeats 1 --pair big --dtype bfloat16 --wheels .whl-peer --static)
  if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
      && export PYTHONPATH=/tmp/site
  fi
fi
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__,
      'cuda', torch.cuda.is_available())" 2>&1 | tee "$OUT/env.txt"
if [[ " $STEPS " == *" fast "* ]]; then
  timeout "${FAST_S:-420}" python3 scripts/gpu_fast.py --out "$OUT/gpu_fast.json" "${fast[@]}" 2>&1 \
    | tee "$OUT/gpu_fast.log"
fi
if [[ " $STEPS " == *" peer "* ]]; then
  timeout "${PEER_S:-150}" python3 scripts/peer_official.py --ours auto chain7 plain "${peer[@]}" 2>&1 \
    | tee "$OUT/peer.log"
fi
if [[ " $STEPS " == *" big "* ]]; then
  timeout "${BIG_S:-300}" python3 scripts/peer_official.py --ours auto chain7 plain "${big[@]}" 2>&1 \
    | tee "$OUT/peer_big.log"
fi
echo "gpu_all done: $(ls "$OUT")"
