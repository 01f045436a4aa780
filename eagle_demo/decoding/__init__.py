"""The lossless decoding loop: the engines (`engine`), the draft tree they grow and verify (`drafter`, `tree`,
`acceptance`, `sampling`), the gate that pauses a draft below break-even (`gate`), hot vocabularies, the static
draft, the events every run streams (`events`) and the reducers over them (`metrics`)."""
