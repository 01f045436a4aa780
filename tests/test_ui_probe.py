"""The pre-flight probe on the page's API: `/load`'s trailing `probe` (off by default, so older clients get what
they got before), the registry keeping the probed pair for later runs, and outputs that stay the target's.

The misconfigured draft is the shipped EAGLE-3 head with a config that says `use_aux_hidden_state: false` (NVIDIA
v2's convention; tests/test_probe.py): loaded as published it drafts from the unfused last hidden state, and the
probe finds the fused reading of the fc weights the file still has."""

from __future__ import annotations

import pytest

from eagle_demo.session import SHIPPED_EAGLE3, SHIPPED_TARGET, PromptError, load_session
from test_probe import RULE, shipped_copy
from test_ui_api import CODE_PROMPT, launch


@pytest.fixture(scope="module")
def app():
    from gradio_client import Client

    from eagle_demo.app import REGISTRY

    demo, url = launch(SHIPPED_TARGET, SHIPPED_EAGLE3)
    try:
        yield Client(url, verbose=False)
    finally:
        demo.close()
        REGISTRY.clear()


def _load(client, draft: str, *probe: bool):
    return client.predict(SHIPPED_TARGET, draft, "", "float32", "cpu", "", *probe, api_name="/load")


def _generate(client) -> dict:
    _, stats = client.predict(CODE_PROMPT, 48, 0.0, 1.0, 0, 0, "chain", None, None, None, 5, True, False, True,
                              api_name="/generate")
    assert stats["identical_to_baseline"] is True and stats["new_tokens"] == 48
    return stats


def test_load_parameters_keep_their_order_and_probe_is_off_by_default(app):
    params = app.view_api(print_info=False, return_format="dict")["named_endpoints"]["/load"]["parameters"]
    assert [p["parameter_name"] for p in params][-1] == "probe"
    assert params[-1]["parameter_has_default"] and params[-1]["parameter_default"] is False
    _, report = app.predict(SHIPPED_TARGET, SHIPPED_EAGLE3, "", "auto", "cpu", api_name="/load")  # an old client
    assert report["probe"] is None


def test_load_with_probe_on_the_shipped_pair(app):
    markdown, report = _load(app, SHIPPED_EAGLE3, True)
    probe = report["probe"]
    assert probe["tau"] > 1 and probe["used"] == probe["declared"]  # the shipped head is published right
    assert probe["used"]["feature_layers"] == RULE and probe["prompts"] <= 3 and probe["max_new_tokens"] <= 32
    line = next(line for line in markdown.splitlines() if line.startswith("**Probe**"))
    assert f"declared feature_layers={RULE}" in line and f"measured tau {probe['declared_tau']:.2f}" in line
    assert "used as declared" in line


def test_probe_switches_a_misdeclared_draft_for_later_runs(app, tmp_path):
    from eagle_demo.app import REGISTRY, make_key

    folder = str(shipped_copy(tmp_path / "said-unfused", eagle_config={"use_aux_hidden_state": False}))
    _, plain = _load(app, folder)
    assert plain["probe"] is None and plain["feature_layers"] is None  # run as published: unfused
    before = _generate(app)

    markdown, report = _load(app, folder, True)  # the same pair, already loaded: probed in place
    probe = report["probe"]
    assert probe["declared"]["feature_layers"] is None and probe["used"]["feature_layers"] is not None
    assert probe["tau"] >= 1.5 * probe["declared_tau"]  # a gross misreading: adopted on clear evidence
    line = next(line for line in markdown.splitlines() if line.startswith("**Probe**"))
    assert "declared feature_layers=None" in line and f"used feature_layers={probe['used']['feature_layers']}" in line
    session = REGISTRY.get(make_key(SHIPPED_TARGET, folder, "", "float32", "cpu"))
    assert session.report.probe == probe and session.pair.head.feature_layers == tuple(probe["used"]["feature_layers"])
    assert session.eagle.runner.feature_layers == session.pair.head.feature_layers

    after = _generate(app)
    assert after["tau"] > before["tau"]
    assert after["token_ids"] == before["token_ids"]  # both equal plain decoding (identical_to_baseline)
    _, again = _load(app, folder, True)  # probed once per loaded pair: the same result, not measured again
    assert again["probe"] == probe


def test_a_generate_queued_behind_a_probe_runs_after_it(app, tmp_path):
    from gradio_client import Client

    folder = str(shipped_copy(tmp_path / "said-unfused-queue", eagle_config={"use_aux_hidden_state": False}))
    other = Client(app.src, verbose=False)
    loading = app.submit(SHIPPED_TARGET, folder, "", "float32", "cpu", "", True, api_name="/load")
    generating = other.submit(CODE_PROMPT, 32, api_name="/generate")
    _, report = loading.result(timeout=300)
    _, stats = generating.result(timeout=300)
    assert report["probe"]["used"]["feature_layers"] is not None
    assert stats["identical_to_baseline"] is True


def test_probe_without_a_draft(app):
    from gradio_client.exceptions import AppError

    _, report = app.predict(SHIPPED_TARGET, "", "", "float32", "cpu", "", True, api_name="/load")
    assert report["family"] == "none" and report["probe"] is None  # nothing to probe, and no error
    with pytest.raises(PromptError, match="nothing to probe") as err:
        load_session(SHIPPED_TARGET, None).probe()
    assert "\n" not in str(err.value)
    with pytest.raises(AppError, match="does-not-exist") as bad:
        app.predict(SHIPPED_TARGET, "does-not-exist", "", "float32", "cpu", "", True, api_name="/load")
    assert "\n" not in str(bad.value).strip() and "Traceback" not in str(bad.value)
