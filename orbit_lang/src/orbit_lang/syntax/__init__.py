"""The syntactic layer: tokens, the parsimonious grammar, and the parser."""
