"""`python -m mlcstandin.serve <model> [mlc_llm serve flags]` does what
`python -m mlc_llm serve ...` does (mlc_llm/__main__.py, not part of the
MLC sources the tests use): enable MLC's logging and run cli/serve.py's
main, which builds MLC's FastAPI app and runs it with uvicorn.

When $CADDY_MLC_STANDIN_RECORD names a file, every HTTP exchange is
appended to it as a JSON line (method, path, status, whether the client
went away; the request and response bodies of an error), so that a test
can count what MLC's entrypoints refused. The app is wrapped, not changed.
"""

import json
import os
import sys

RECORD_ENV = "CADDY_MLC_STANDIN_RECORD"
_KEEP = 4096


class Recorder:
    """ASGI middleware that records each HTTP exchange."""

    def __init__(self, app, path):
        self.app = app
        self.file = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        info = {"method": scope["method"], "path": scope["path"], "status": None, "disconnected": False}
        request, response = bytearray(), bytearray()

        async def recv():
            message = await receive()
            if message["type"] == "http.disconnect":
                info["disconnected"] = True
            elif len(request) < _KEEP:
                request.extend(message.get("body", b"")[: _KEEP - len(request)])
            return message

        async def snd(message):
            if message["type"] == "http.response.start":
                info["status"] = message["status"]
            elif message["type"] == "http.response.body" and (info["status"] or 0) >= 400 and len(response) < _KEEP:
                response.extend(message.get("body", b"")[: _KEEP - len(response)])
            await send(message)

        try:
            await self.app(scope, recv, snd)
        except BaseException as exc:
            info["exception"] = repr(exc)
            raise
        finally:
            if (info["status"] or 500) >= 400:
                info["request"] = request.decode(errors="replace")
                info["response"] = response.decode(errors="replace")
            self.file.write(json.dumps(info) + "\n")


def main():
    from mlc_llm.support import logging

    logging.enable_logging()
    record = os.environ.get(RECORD_ENV)
    if record:
        import uvicorn

        run = uvicorn.run
        uvicorn.run = lambda app, *args, **kwargs: run(Recorder(app, record), *args, **kwargs)
    from mlc_llm.cli import serve

    serve.main(sys.argv[1:])


if __name__ == "__main__":
    main()
