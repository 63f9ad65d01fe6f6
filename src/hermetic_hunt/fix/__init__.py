"""From a finding to a fix: suggested changes, as patches, verified on a copy.

* :mod:`.source` -- the project's source, read and parsed (pure, ``ast``);
* :mod:`.analyze` -- what a test changes that outlives it (pure);
* :mod:`.patch` -- edits to source files, as unified diffs (pure);
* :mod:`.suggest` -- one :class:`~.suggest.Suggestion` per flake, for its
  kind (pure: reports call it);
* :mod:`.verify` -- a patch applied to a temporary copy of the rootdir and
  the flake's reproducer run there, N times;
* :mod:`.command` -- ``hermetic-hunt fix ID``: suggest, verify, store, and
  with ``--apply`` write the patch to the checkout.

The stage sits after replay and before the reports (which show each flake's
suggestion): it reads the store and runs probes, and never touches the
user's files unless ``--apply`` is given.
"""
