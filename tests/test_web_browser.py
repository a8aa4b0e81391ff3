"""The explorer page in a real headless Chromium (Playwright driving the system's browser; no
browser is ever downloaded): load the page, move a slider and see the plan change, see a case
where nothing fits explained, draw a chart, download the plan, upload a problem, and take a
screenshot.

Without a browser these tests skip, except under CI (the `CI` environment variable, which
.ci/run sets after installing Debian's `chromium`), where they fail."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "problems"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TIMEOUT_MS = 90_000  # one solve under a loaded CI machine, with room


def under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _missing(why: str) -> None:
    if under_ci():
        pytest.fail(f"browser tests must run in CI: {why}")
    pytest.skip(why)


def find_browser() -> str | None:
    """A Chromium on this machine: PLANNER_CHROMIUM, else the first browser on PATH."""
    named = os.environ.get("PLANNER_CHROMIUM")
    if named:
        return named if Path(named).is_file() else None
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    try:
        from web_server import running

        from planner.web.service import ServeConfig
    except ImportError as e:
        _missing(f"the web extra is not installed ({e.name})")
    with running(ServeConfig(examples_dir=EXAMPLES, time_limit=30)) as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright package is not installed (pip install -e '.[dev]')")
    exe = find_browser()
    if exe is None:
        _missing("no Chromium found (apt-get install chromium, or set PLANNER_CHROMIUM)")
    with sync_playwright() as p:
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
        b = p.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser: Any, url: str) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 1000}, accept_downloads=True)
    pg = context.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(url)
    pg.wait_for_selector("#status.OPTIMAL")  # the first example is solved on load
    yield pg
    context.close()
    assert not errors, errors  # no script error on the page


def total_usd(page: Any) -> float:
    text = page.inner_text("#decision")
    found = re.search(r"\$([\d,]+) over the horizon", text)
    assert found, text
    return float(found[1].replace(",", ""))


def slider(page: Any, path: str) -> Any:
    return page.locator(f'.control[data-path="{path}"] input[type=range]')


@pytest.mark.slow
def test_moving_a_slider_changes_the_plan(page: Any) -> None:
    assert page.inner_text("#problem-name") == "chat-70b"
    before = total_usd(page)
    assert "proved optimal" in page.inner_text("#confidence")
    assert page.locator("#plan table").count() == 3  # bill of materials, costs, workloads
    price = slider(page, "horizon.electricity_usd_per_kwh")
    price.focus()
    start = float(price.input_value())
    price.press("End")  # the keyboard, as a user moves it: electricity to the slider's top
    page.wait_for_function(
        "old => /\\$[\\d,]+ over/.test(document.querySelector('#decision').textContent)"
        " && !document.querySelector('#decision').textContent.includes(old)",
        arg=f"${before:,.0f}",
    )
    page.wait_for_selector("#status.OPTIMAL")
    assert total_usd(page) > before
    shown = page.locator('.control[data-path="horizon.electricity_usd_per_kwh"] input[type=number]')
    assert float(shown.input_value()) == float(price.input_value()) > start


@pytest.mark.slow
def test_nothing_fits_and_why_not_explains_it(page: Any, tmp_path: Path) -> None:
    budget = page.locator('.control[data-path="constraints.budget_usd"]')
    budget.locator("input[type=checkbox]").check()
    budget.locator("input[type=range]").focus()
    budget.locator("input[type=range]").press("Home")  # the least budget the slider offers
    page.wait_for_selector("#status.INFEASIBLE")
    assert "No plan" in page.inner_text("#decision")
    page.click("#why")
    page.wait_for_selector("#explanation:not([hidden])")
    why = page.inner_text("#explanation-list")
    assert "budget" in why and "--set constraints.budget_usd=" in why
    shot = tmp_path / "explorer-infeasible.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    page.click("#explanation-list button.apply")  # the least budget that gives a plan
    page.wait_for_selector("#status.OPTIMAL")
    needed = float(budget.locator("input[type=number]").input_value())
    assert needed >= total_usd(page) and "budget" in page.inner_text("#plan")


@pytest.mark.slow
def test_chart_download_and_upload(page: Any, tmp_path: Path) -> None:
    page.click("#chart-tco")
    page.wait_for_selector("#chart:not([hidden])")
    src = page.get_attribute("#chart", "src") or ""
    assert src.startswith("data:image/svg+xml;base64,")
    assert page.evaluate("document.querySelector('#chart').naturalWidth") > 100
    shot = tmp_path / "explorer-plan.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with page.expect_download() as got:
        page.click("#download-json")
    saved = tmp_path / "plan.json"
    got.value.save_as(saved)
    plan = json.loads(saved.read_text(encoding="utf-8"))
    assert plan["problem"] == "chat-70b" and plan["status"] == "OPTIMAL"
    with page.expect_download() as got:
        page.click("#download-md")
    memo = tmp_path / "memo.md"
    got.value.save_as(memo)
    assert memo.read_text(encoding="utf-8").startswith("# Purchase memo: chat-70b")
    page.set_input_files("#upload", str(EXAMPLES / "infeasible.yaml"))
    page.wait_for_selector("#status.INFEASIBLE")
    assert page.inner_text("#problem-name") == "infeasible"
    page.set_input_files(
        "#upload",
        files=[{"name": "broken.yaml", "mimeType": "text/yaml", "buffer": b"name: [\n"}],
    )
    page.wait_for_selector("#error:not([hidden])")
    assert page.inner_text("#error").startswith("broken.yaml:")


def test_a_missing_browser_fails_under_ci_and_skips_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PLANNER_CHROMIUM", "/nonexistent/chromium")
    assert find_browser() is None
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="must run in CI"):
        _missing("no Chromium found")
    monkeypatch.setenv("CI", "")
    with pytest.raises(pytest.skip.Exception):
        _missing("no Chromium found")
