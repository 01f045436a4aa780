"""What every layer may use: run settings (`config`), error types (`errors`), file locations (`paths`) and the
device and thread set-up (`devices`). Imports nothing else of the package."""
