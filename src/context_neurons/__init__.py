"""context-neurons: the reproducible companion to Gibson (2025), "Decomposing Attention To Find
Context-Sensitive Neurons", with context look-ups (Neo, Cohen and Barez 2024).

Layers, from the bottom (each imports only from layers below it; ``tests/unit/test_layout.py``
checks it):

1. :mod:`.config` (environment and paths), :mod:`.checks` (input checks), :mod:`.hooks`,
   :mod:`.caching`;
2. :mod:`.text` (corpora, token windows, topic word lists);
3. :mod:`.models` (one loader; the planted model; toy models);
4. the method, one module or subpackage per chapter (a subpackage: one module per question):
   :mod:`.decomposition` (1), :mod:`.taxonomy` (2), :mod:`.stability` (3), :mod:`.circuit` (4:
   ``build``, ``fit``), :mod:`.discovery` (``scores``, ``tokens``, ``sublatents``, ``pairs``,
   ``loudness``, ``planted``), :mod:`.casestudies`, :mod:`.respelling` (5), :mod:`.evaluation`
   (6), :mod:`.lookups` (7);
5. :mod:`.plotting` (figures), then :mod:`.gallery` and :mod:`.interactive` (pages and widgets);
6. the top: :mod:`.reproduce` (the main job), :mod:`.book` (Colab, chapter set-up, stored
   notebooks) and the command line.
"""

__version__ = "0.2.0"
