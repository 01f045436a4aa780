"""Choosing the draft tree's shape for a pair on this machine: measured round costs (`costs`), every candidate
replayed on calibration text (`replay`, `replay_batch`, `packed_text`), the choice (`choose`) and a run that moves
its shape with its own acceptance (`retune`)."""
