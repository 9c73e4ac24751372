"""The hyperparameters of the scikit-learn-style objects (estimators, sampler
objects, the Gibbs sampler)."""

__all__ = ["store_params"]


def store_params(estimator, arguments):
    """Store the arguments of an ``__init__`` as attributes of the same names, and
    nothing else: the scikit-learn convention that ``get_params``, ``set_params``
    and ``clone`` rely on. It is the whole body of such an ``__init__``, called as
    ``store_params(self, locals())`` (``locals()`` then holds the arguments and
    ``self``)."""
    for name, value in arguments.items():
        if name != "self":
            setattr(estimator, name, value)
