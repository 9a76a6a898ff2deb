"""Page-side snippets and the page opener the browser tests share (one copy each)."""

APP = "window.comfyAPI.app.app"

# ([node id, widget name]) -> the widget's value, or null when the node or widget is missing
WIDGET_VALUE = f"""([id, name]) => {{
    const n = {APP}.graph.getNodeById(id);
    const w = n && (n.widgets || []).find((w) => w.name === name);
    return w ? w.value : null;
}}"""


def open_canvas(browser, worker, viewport=(1400, 900)):
    """(context, page): the worker's ComfyUI page in a new browser context that reaches nothing
    but the worker, once the pack's extension and the canvas are ready. Close the context."""
    ctx = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
    ctx.route("**/*", lambda route: route.continue_() if route.request.url.startswith(worker.url)
              or route.request.url.startswith("data:") else route.abort())
    p = ctx.new_page()
    p.goto(worker.url + "/", wait_until="domcontentloaded")
    p.wait_for_function("window.__seedreuse && window.__seedreuse.ready === true", timeout=60_000)
    p.wait_for_function(f"!!({APP} && {APP}.graph && {APP}.canvas)", timeout=30_000)
    return ctx, p
