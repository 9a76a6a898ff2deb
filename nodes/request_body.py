"""Reading a request body with a byte cap (the routes refuse what is larger before reading it)."""
from __future__ import annotations


async def read_capped(request, cap: int, too_large) -> bytes:
    """The body of ``request``, at most ``cap`` bytes; beyond, ``too_large(actual)`` is raised
    (from Content-Length before anything is read, else as soon as the stream passes the cap)."""
    if request.content_length is not None and request.content_length > cap:
        raise too_large(f"{request.content_length} bytes")
    chunks, n = [], 0
    while True:
        chunk = await request.content.readany()
        if not chunk:
            return b"".join(chunks)
        n += len(chunk)
        if n > cap:
            raise too_large(f"more than {cap} bytes")
        chunks.append(chunk)
