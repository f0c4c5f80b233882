"""Text: the offline corpora and OpenWebText (:mod:`.corpora`), the token windows the model reads
(:mod:`.windows`) and the topic word lists (:mod:`.topics`). The bottom layer with
:mod:`context_neurons.config`: it imports nothing of the package's mathematics."""
