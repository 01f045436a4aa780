"""`gpu_task` failing under the real `spaces` package (test_zerogpu.py): `python tests/zerogpu_calls.py` with the
environment of `zerogpu_emulation.space_env`. Prints one JSON line: what each call raised."""

import json
import threading

import zerogpu_fork  # noqa: F401 - first, and imported to the end, before `spaces`

# isort: split
import spaces  # noqa: F401,E402

from zerogpu_emulation import skip_device_start  # noqa: E402

skip_device_start()

from eagle_demo.app.gpu_tasks import StreamTask, gpu_task  # noqa: E402
from eagle_demo.app.registry import make_key  # noqa: E402
from eagle_demo.common.config import RunConfig  # noqa: E402
from eagle_demo.prepare import ReadyRun  # noqa: E402

key, results = make_key("assets/tiny-target", "assets/tiny-eagle1"), {}
task = StreamTask("eagle", ReadyRun((1, 2, 3), RunConfig()))  # as the main process prepared it
items = list(gpu_task(key, None, task))  # this process serves no pair: the worker cannot find it
results["error"] = items[0][1] if [i[0] for i in items] == ["error"] else repr(items)
try:
    list(gpu_task(key, threading.Event(), task))  # a lock cannot travel to the worker
except Exception as exc:  # noqa: BLE001 - its class is the result
    results["unpicklable"] = type(exc).__name__
print(json.dumps(results))
