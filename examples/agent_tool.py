"""The knowledge base as an agent's tool: the MCP server (``fabric mcp``) driven by the official MCP SDK client,
as an agent host drives it.

``python examples/agent_tool.py [HOME]`` lists the tools with their input and output schemas, calls ``query`` the
way a model would, and reads the structured content it answers. The home defaults to ``FABRIC_HOME`` (run
``fabric demo`` first for something to find).
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client


async def main(home: str | None) -> None:
    args = ["--home", home, "mcp"] if home else ["mcp"]
    params = StdioServerParameters(command="fabric", args=args, env=dict(os.environ))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for tool in (await session.list_tools()).tools:
            inputs = ", ".join(tool.input_schema.get("properties", {}))
            print(f"tool {tool.name}({inputs}) -> {sorted((tool.output_schema or {}).get('properties', {}))}")
        result = await session.call_tool("query", {"topic": "Reciprocal Rank Fusion", "limit": 3, "mode": "research"})
        print(result.content[0].text)
        for item in result.structured_content["items"]:
            print(f"  {item['id']}  {item['topic']!r}  score_total={item['score_total']:.3f}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))
