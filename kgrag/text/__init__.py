"""Text at the bottom of the house: the one tokenizer and token count
(:mod:`.tokens`), how names and titles are keyed (:mod:`.keys`), and the spaCy
pipeline loader (:mod:`.nlp`)."""
