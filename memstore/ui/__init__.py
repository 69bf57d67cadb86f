"""`memctl ui`: a local, read-only page to browse, audit and understand a store's memory.

`guard` (who may ask: the token, the Host, the address, GET only; the headers every answer
carries), `app` (the Starlette app: its routes), `site` (what the pages share: links, the
templates, the store each request reads, what is kept between pages),
`pages` (what each page shows, gathered from the read layer), `reads` (the few reads the pages
need beyond MemoryReads: counts, last events, growth), `timeline` (a memory's events as diffs),
`runs` (what a run did: a consolidation's sources and result, an import, a session; its undo),
`health` (the history verified as `history --verify` does it, secrets kept, growth as a
chart), `highlight` (the words a search matched, found in the text as the index tokenizes
it), `shown` (hostile text made visible: controls, bidi and tag characters), `server`
(uvicorn on 127.0.0.1, the URL printed, the browser opened without it on its command line).

Starlette, uvicorn and Jinja2 come with the `ui` extra; nothing here is imported before
`memctl ui` runs.
"""
