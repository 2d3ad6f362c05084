"""What a name is in one file: imports, classes and whether each is an nn.Module class,
functions by name (`facts`), and where and when a name is bound (`bindings`)."""
