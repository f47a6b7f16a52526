"""The demo backends of `make run`, in one process: an MCP server (a few tools, a resource and a
prompt) at /mcp, and a small REST pet store at /rest/v1 described by docs/examples/petstore.yaml,
which the demo tenant serves as an OpenAPI backend.

Run: python scripts/demo_server.py --port 9001   (Streamable HTTP at /mcp, every protocol revision)"""

from __future__ import annotations

import argparse
import asyncio
import datetime

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

#: The API key the demo pet store expects in `X-API-Key`; the demo backend's egress credential.
DEMO_REST_KEY = "demo-petstore-key"


def build_server() -> MCPServer:
    server = MCPServer("demo", instructions="A demo server: arithmetic, echo, time, and a slow countdown.")

    @server.tool()
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def utc_now() -> str:
        """The current UTC time in ISO 8601."""
        return datetime.datetime.now(datetime.UTC).isoformat()

    @server.tool()
    async def countdown(start: int, ctx: Context) -> str:
        """Count down from `start` to zero, reporting progress at each step."""
        for step in range(start, 0, -1):
            await ctx.report_progress(start - step, start, f"{step} left")
            await asyncio.sleep(0.01)
        return "lift-off"

    @server.resource("demo://readme", mime_type="text/markdown")
    def readme() -> str:
        """What this demo server offers."""
        return "# Demo\nTools: add, echo, utc_now, countdown."

    @server.prompt()
    def greet(name: str) -> str:
        """A greeting prompt."""
        return f"Say hello to {name} in one short sentence."

    return server


def pet_store_routes() -> list[Route]:
    """The REST API of docs/examples/petstore.yaml, in memory."""
    pets: dict[int, dict[str, object]] = {1: {"id": 1, "name": "Rex", "tag": "dog"}, 2: {"id": 2, "name": "Tom"}}

    def refused(request: Request) -> JSONResponse | None:
        if request.headers.get("x-api-key") != DEMO_REST_KEY:
            return JSONResponse({"message": "missing or wrong X-API-Key"}, status_code=401)
        return None

    async def collection(request: Request) -> JSONResponse:
        if (answer := refused(request)) is not None:
            return answer
        if request.method == "POST":
            pet = await request.json()
            if not isinstance(pet, dict) or not isinstance(pet.get("id"), int) or not isinstance(pet.get("name"), str):
                return JSONResponse({"message": "a pet needs an integer id and a name"}, status_code=400)
            pets[pet["id"]] = {key: pet[key] for key in ("id", "name", "tag") if key in pet}
            return JSONResponse(pets[pet["id"]], status_code=201)
        limit = int(request.query_params.get("limit", "100"))
        return JSONResponse(list(pets.values())[:limit])

    async def one(request: Request) -> JSONResponse:
        if (answer := refused(request)) is not None:
            return answer
        pet = pets.get(int(request.path_params["pet_id"])) if request.path_params["pet_id"].isdigit() else None
        if pet is None:
            return JSONResponse({"message": "no such pet"}, status_code=404)
        return JSONResponse(pet)

    return [
        Route("/rest/v1/pets", collection, methods=["GET", "POST"]),
        Route("/rest/v1/pets/{pet_id}", one, methods=["GET"]),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9001)
    args = parser.parse_args()
    app = build_server().streamable_http_app(host=args.host)
    app.router.routes.extend(pet_store_routes())
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
