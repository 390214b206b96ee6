"""Serving a fake's aiohttp application on 127.0.0.1, the same way for every fake."""

from __future__ import annotations

from aiohttp import web


async def serve(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Listen on `host:port` (0 picks a free port); the runner (to clean up) and the port bound.

    handler_cancellation: a client that gave up stops a handler still sleeping; shutdown_timeout:
    stopping never waits for such handlers."""
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=0.1)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner, runner.addresses[0][1]
