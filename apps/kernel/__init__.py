"""The pure domain of the gateway: who calls (`identity`), the names a virtual host shows (`names`),
who may call what (`policy`), what a call costs (`costs`), the shapes of `tool_search`
(`search_tool`), the audit row of one call (`audit_entry`), and one helper the pure code shares
(`singleflight`). Every app and the gateway's pipeline build on it; it imports no framework, no I/O
library and no app (an import contract checks it). See docs/architecture.md."""
