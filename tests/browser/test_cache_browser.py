"""The cache browser (web/seedreuse/cache_browser.js) in a real Chromium against a real worker.

Two caches are made by real runs (a segment run with Prefix Merge: result video, segments, two
takes; an encoder-only run). The page opens the "SeedReuse caches" sidebar tab by its button,
sees both caches with their sizes and the budget line, loads the result preview (the <video>
reaches HAVE_METADATA and its src was answered by the result route), inspects and checks a cache,
deletes the other one through the confirmation, and the cache is gone from the list and the disk.
Screenshots: test-artifacts/browser/cache_browser.png (list, preview, inspect and check output)
and cache_browser_confirm.png (the delete confirmation).
"""
from __future__ import annotations

import uuid

import pytest

from seedreuse_lab import graphs
from seedreuse_lab.reuse_graphs import SEG, segment_graph, t2v_reuse
from ._canvas import APP

pytestmark = [pytest.mark.comfy, pytest.mark.browser]

TAB_BUTTON = ".seedreuse-caches-tab-button"
SMALL = dict(width=32, height=32, length=5, steps=1)


def seg_prompt(seed: int, name: str, n: int = 0) -> dict:
    p = segment_graph("browser_seg.png", seed, prefix_segments=n, cache_name=name, F=5, M=1, total_frames=13,
                      steps=1)
    p[SEG.WAN_I2V]["inputs"].update(width=32, height=32)
    p[SEG.SAMPLER]["inputs"]["cfg"] = 1
    return p


@pytest.fixture(scope="module")
def caches(ui_worker, module_workers):
    w = ui_worker
    graphs.write_test_image(w.input_dir / "browser_seg.png", seed=5)
    seg, doomed = f"talk-{uuid.uuid4().hex[:6]}", f"old-{uuid.uuid4().hex[:6]}"
    w.run(seg_prompt(1, seg)).raise_for_status()
    w.run(seg_prompt(2, seg, n=1)).raise_for_status()
    w.run(t2v_reuse(3, "a cache to delete", cache_name=doomed, **SMALL)).raise_for_status()
    return {"seg": seg, "doomed": doomed, "root": module_workers.cache_root}


@pytest.fixture
def page(browser, ui_worker):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx.route("**/*", lambda route: route.continue_() if route.request.url.startswith(ui_worker.url)
              or route.request.url.startswith("data:") or route.request.url.startswith("blob:")
              else route.abort())
    p = ctx.new_page()
    p.seedreuse_console = []
    p.seedreuse_results = []
    p.on("console", lambda m: p.seedreuse_console.append((m.type, m.text, (m.location or {}).get("url", ""))))
    p.on("pageerror", lambda e: p.seedreuse_console.append(("pageerror", str(e), "")))
    p.on("response", lambda r: p.seedreuse_results.append(r.status) if "/seedreuse/caches/" in r.url
         and r.url.split("?")[0].endswith("/result") else None)
    p.goto(ui_worker.url + "/", wait_until="domcontentloaded")
    p.wait_for_function("window.__seedreuse && window.__seedreuse.ready === true", timeout=60_000)
    p.wait_for_function(f"!!({APP} && {APP}.graph && {APP}.canvas)", timeout=30_000)
    yield p
    ctx.close()


def card(page, name: str):
    return page.locator(f'[data-seedreuse-cache="{name}"]')


def test_cache_browser_lists_previews_checks_and_deletes(page, caches, browser_artifacts):
    seg, doomed, root = caches["seg"], caches["doomed"], caches["root"]
    assert page.evaluate("() => window.__seedreuse.cacheBrowser.tabId") == "seedreuse-caches"
    page.locator(TAB_BUTTON).first.click(timeout=30_000)
    card(page, seg).wait_for(state="visible", timeout=30_000)
    card(page, doomed).wait_for(state="visible", timeout=30_000)

    text = card(page, seg).inner_text()
    assert "3 segment(s), 13 frames" in text and "2 take(s)" in text and "last used" in text, text
    assert "made by prompt" in text and ("KiB" in text or "MiB" in text), text
    assert "slot(s)" in card(page, doomed).inner_text()
    budget = page.locator("[data-seedreuse-budget]").inner_text()
    assert "used" in budget and "disk:" in budget and "free of" in budget, budget

    # the preview: the result route answers the <video>'s src and the element gets its metadata
    video = card(page, seg).locator("video")
    assert "/seedreuse/caches/" in video.get_attribute("src")
    page.wait_for_function(
        f"""() => {{ const v = document.querySelector('[data-seedreuse-video="{seg}"]');
                 return v && (v.readyState >= 1 || v.error); }}""", timeout=30_000)
    state = page.evaluate(f"""() => {{ const v = document.querySelector('[data-seedreuse-video="{seg}"]');
        return {{ ready: v.readyState, error: v.error && v.error.code, duration: v.duration }}; }}""")
    assert page.seedreuse_results and all(s in (200, 206) for s in page.seedreuse_results), page.seedreuse_results
    assert state["ready"] >= 1 and state["error"] is None and state["duration"] > 0, state

    # inspect and check
    card(page, seg).locator('[data-seedreuse-action="inspect"]').click()
    detail = card(page, seg).locator(".seedreuse-cache-detail")
    detail.wait_for(state="visible", timeout=10_000)
    text = detail.inner_text()
    # every kept take with its seed, frames and segments (the newest too: its record points at the
    # version's segment section)
    assert "take 2: seed 2, 13 frames, 3 segment(s)" in text and "take 1: seed 1, 13 frames, 3 segment(s)" in text, text
    assert "null" not in text and "undefined" not in text, text
    card(page, doomed).locator('[data-seedreuse-action="check"]').click()
    page.wait_for_function(
        f"""() => {{ const d = document.querySelector('[data-seedreuse-cache="{doomed}"] .seedreuse-cache-detail');
                 return d && d.textContent.startsWith("check:"); }}""", timeout=60_000)
    assert card(page, doomed).locator(".seedreuse-cache-detail").inner_text() == f"check: OK ({doomed})"
    page.screenshot(path=str(browser_artifacts / "cache_browser.png"))

    # delete: asks first; Cancel keeps it, the confirmation deletes it
    card(page, doomed).locator('[data-seedreuse-action="delete"]').click()
    confirm = card(page, doomed).locator(".seedreuse-cache-confirm")
    confirm.wait_for(state="visible", timeout=10_000)
    card(page, doomed).locator('[data-seedreuse-action="cancel"]').click()
    confirm.wait_for(state="detached", timeout=10_000)
    assert (root / doomed / "manifest.json").is_file()
    card(page, doomed).locator('[data-seedreuse-action="delete"]').click()
    confirm.wait_for(state="visible", timeout=10_000)
    assert f"Delete cache '{doomed}'" in confirm.inner_text()
    page.screenshot(path=str(browser_artifacts / "cache_browser_confirm.png"))
    card(page, doomed).locator('[data-seedreuse-action="confirm-delete"]').click()
    card(page, doomed).wait_for(state="detached", timeout=30_000)
    assert not (root / doomed).exists()
    assert card(page, seg).is_visible()
    assert page.evaluate("() => window.__seedreuse.lastCacheDelete") == doomed

    ours = [m for m in page.seedreuse_console if m[0] in ("error", "warning", "pageerror")
            and ("[seedreuse]" in m[1] or "/seedreuse/" in m[2] or "cache_browser" in m[1])]
    assert not ours, ours
