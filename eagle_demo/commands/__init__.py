"""The command line, `python -m eagle_demo {generate, inspect, bench, export, doctor}`: `cli` holds the parser and
the dispatch, `args` the shared argument helpers, and each subcommand has its own module. Nothing below this
package imports it."""
