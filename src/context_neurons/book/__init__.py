"""The book's own plumbing, apart from the science: the Colab set-up every chapter starts with
(:mod:`.colab`), the chapter set-up (:mod:`.chapter`) and the stored executed notebooks that nbval
checks (:mod:`.notebooks`). The top layer: nothing of the package imports it."""
