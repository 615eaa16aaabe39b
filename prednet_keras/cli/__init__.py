"""Click commands, one module per console script: parse, call the library, print."""
