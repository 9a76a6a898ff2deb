"""Page-side snippets the browser tests share (one copy each)."""

APP = "window.comfyAPI.app.app"

# ([node id, widget name]) -> the widget's value, or null when the node or widget is missing
WIDGET_VALUE = f"""([id, name]) => {{
    const n = {APP}.graph.getNodeById(id);
    const w = n && (n.widgets || []).find((w) => w.name === name);
    return w ? w.value : null;
}}"""
