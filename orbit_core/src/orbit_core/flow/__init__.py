"""Flow control at run time (docs/language/flow-control.md): the values of
a declaration's keys and priority for one execution. Pure: the engine's
`admission` component keeps the counts."""
