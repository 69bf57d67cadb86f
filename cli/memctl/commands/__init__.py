"""memctl's commands, a module per group of them; `memctl.app` registers them, in the order
`memctl --help` lists them. What they share (State, the store, errors) is `memctl.context`."""
