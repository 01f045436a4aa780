import atexit
import os
import shutil
import tempfile

# Tests never write into the real ~/.cache/eagle_demo (the autotree choices above all): every test, and every
# subprocess started with a copy of os.environ, gets its own cache root, removed at the end of the session.
_CACHE = tempfile.mkdtemp(prefix="eagle-demo-tests-")
os.environ["EAGLE_DEMO_CACHE"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, True)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

# Tiny models run fastest on one thread, and CI machines are shared: oversubscribed threads make
# small-matmul workloads many times slower.
torch.set_num_threads(1)
