"""Small scripts the page runs in the browser (no Gradio, no models)."""

from __future__ import annotations

__all__ = ["FOLLOW_OUTPUT_JS"]

# The output box (`.eagle-tokens`, scrollable past 32em) is redrawn whole at each update, which would leave it at its
# top while new tokens arrive below. This keeps it at its bottom while the reader is there: scrolling up stops the
# following, scrolling back to the bottom (or a new, shorter run) starts it again. Gradio runs it once per page,
# with `element` the component's root; a MutationObserver sees each redraw.
FOLLOW_OUTPUT_JS = """
let follow = true, lastLength = 0;
const box = () => element.querySelector('.eagle-tokens');
element.addEventListener('scroll', (event) => {
  const b = event.target;
  if (b && b.classList && b.classList.contains('eagle-tokens')) {
    follow = b.scrollTop + b.clientHeight >= b.scrollHeight - 24;
  }
}, true);
new MutationObserver(() => {
  const b = box();
  if (!b) return;
  const length = b.textContent.length;
  if (length < lastLength) follow = true;
  lastLength = length;
  if (follow) b.scrollTop = b.scrollHeight;
}).observe(element, {childList: true, subtree: true, characterData: true});
"""
