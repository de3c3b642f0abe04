"""`orbit lsp`: the ORBIT language server (pygls, stdio, full document sync).

Three layers, each testable on its own:

- `workspace.py` owns the unsaved buffers and turns one document into an
  `Analysis`: the loader reads open buffers before the disk (its `read`
  port) and parses through a cache keyed by path and content (its `parse`
  port), so an edit re-parses only the file that changed, and within it only
  the declarations the edit touched (`orbit_lang.incremental`); the program is
  then checked (not lowered) by the real compiler.
- `features.py` answers hover, definition, completion and outline from an
  analysis and the current text; it never raises on odd input (a position
  past the end, a broken document), it answers nothing.
- `server.py` wires both to pygls. Analyses run on one worker thread, newest
  version only, so a keystroke never queues behind a stale compile;
  completion answers from the latest finished analysis without waiting,
  hover and definition wait for the current one.
- `verifying.py` is verify on save (off unless `orbit.verify.onSave`):
  `orbit verify`'s search with a small budget on a thread of its own, its
  broken invariants published with the document's diagnostics.
"""
