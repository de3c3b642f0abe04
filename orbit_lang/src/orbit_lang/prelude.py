"""The built-in prelude that is part of every compilation (chapters 07, 28)."""

from __future__ import annotations

PRELUDE_PATH = "<prelude>"

PRELUDE_SOURCE = """\
task "orbit.http.request" {
    version "1.0.0"
    input {
        method: String = "GET"
        url: String
        headers: Map<String, String> = {}
        body: JSON = null
    }
    output {
        status: Int
        headers: Map<String, String>
        body: JSON
    }
}
"""
