#!/usr/bin/env bash
# Issue 21's whole GPU visit in one device call (docs/gpu/README.md): the pinned transformers from .whl/, then
# scripts/gpu_fast.py (static cache + CUDA graphs, bf16, the 8B-shaped target), then the official EAGLE code
# against ours on the GPU, ours with static caches + CUDA graphs (scripts/peer_official.py --static, the official
# code installed offline from .whl-peer/). Each step has its own time limit, so the last one still runs when an
# earlier one overruns. Reports and logs go to $OUT.
#
#   scripts/gpu_all.sh            # on the lent machine, $OUT set by the device tool
#   scripts/gpu_all.sh --smoke    # here, on the CPU: every step with tiny sizes (the peer from the usual venv)
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-out/gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
if [ "${1:-}" = "--smoke" ]; then
  fast=(--smoke) peer=(--device cpu --repeats 1 --max-new-tokens 16 --pair shipped --static)
else
  fast=(--seconds "${FAST_SECTIONS_S:-300}") peer=(--device cuda --repeats 2 --pair both --wheels .whl-peer --static)
  if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
      && export PYTHONPATH=/tmp/site
  fi
fi
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__,
      'cuda', torch.cuda.is_available())" 2>&1 | tee "$OUT/env.txt"
timeout "${FAST_S:-420}" python3 scripts/gpu_fast.py --out "$OUT/gpu_fast.json" "${fast[@]}" 2>&1 \
  | tee "$OUT/gpu_fast.log"
timeout "${PEER_S:-150}" python3 scripts/peer_official.py --ours auto chain7 plain "${peer[@]}" 2>&1 \
  | tee "$OUT/peer.log"
echo "gpu_all done: $(ls "$OUT")"
