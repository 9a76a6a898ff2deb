"""Browser tests: the web extension on a real ComfyUI frontend in Chromium (Playwright)."""
