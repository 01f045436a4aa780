"""The pre-flight probe: measure a loaded pair's acceptance under the conventions its draft declares and under
the alternatives its checkpoint leaves open (`measure`), and the evidence rule that decides whether an
alternative really wins (`evidence`)."""
