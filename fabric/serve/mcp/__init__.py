"""The MCP server (official SDK) over an open engine, its streamable HTTP transport and the entry resource."""
