"""The estimators' parameter layout: which column of the posterior draws is
which coefficient, its name, its prior, and the variables, dimensions and
coordinates of the ArviZ export. One place knows the layout; the names in
``trace_.param_names``, the summaries, the plots and ArviZ all come from it."""
import numpy as np

__all__ = ["ParamLayout", "param_layout"]


class ParamLayout:
    """Named variables over the columns of a flat parameter vector.

    Parameters
    ----------
    variables : list of (str, tuple of str, ndarray of int)
        Each variable's name, dimension names and columns: an integer array
        of the variable's shape whose entries are its columns in ``theta``.
        Together the columns cover ``0 .. n_params - 1`` once.
    coords : dict of str to list
        The labels of each dimension (feature names, class labels).
    prior_scales : array-like of float
        The standard deviation of each column's Gaussian prior.
    prior_means : array-like of float, optional
        The mean of each column's prior (default 0).

    Attributes
    ----------
    priors : list of str
        The prior of each column in words, e.g. ``"normal(0, 10)"``.
    names : list of str
        The name of each column, as ArviZ names the elements of a variable:
        ``coef[age]``, ``coef[setosa, petal_width]``, ``intercept``.
    """

    def __init__(self, variables, coords, prior_scales, prior_means=None):
        self.variables = [(name, tuple(dims), np.asarray(cols, dtype=np.intp))
                          for name, dims, cols in variables]
        self.coords = {d: list(v) for d, v in coords.items()}
        self.prior_scales = np.array(prior_scales, dtype=np.float64)
        self.prior_means = (np.zeros_like(self.prior_scales) if prior_means is None
                            else np.array(prior_means, dtype=np.float64))
        self.priors = [f"normal({m:.4g}, {s:.4g})"
                       for m, s in zip(self.prior_means, self.prior_scales)]
        names = [None] * len(self.priors)
        for name, dims, cols in self.variables:
            for idx in np.ndindex(cols.shape):
                labels = ", ".join(str(self.coords[d][i]) for d, i in zip(dims, idx))
                names[cols[idx]] = f"{name}[{labels}]" if dims else name
        if None in names:
            raise ValueError("the variables do not cover every column")
        self.names = names

    @property
    def dims(self):
        """``{variable: [dimension names]}`` for ``arviz.from_dict``."""
        return {name: list(dims) for name, dims, _ in self.variables}

    def split(self, draws):
        """``{variable: draws[..., columns]}``: draws of shape (..., n_params)
        as each variable's array, shape (..., *variable shape)."""
        return {name: draws[..., cols] for name, _, cols in self.variables}


def param_layout(model, feature_names=None, classes=None, intercept_loc=0.0):
    """The layout of a GLM's parameters, as the models lay them out.

    Parameters
    ----------
    model : GLM, DaskGLM, GaussianScaleRegressionModel or MultinomialLogisticModel
        The fitted model: its ``n_features``, ``fit_intercept``, ``n_params``,
        ``n_classes`` (multinomial) and prior (every coefficient's scale).
    feature_names : array-like of str, optional
        The columns' names (``feature_names_in_``); default their indices
        ``0 .. n_features - 1``.
    classes : array-like, optional
        Multinomial models: the class labels (``classes_``) of the ``K``
        blocks; default ``0 .. K - 1``.
    intercept_loc : float, default=0.0
        The mean of the intercept's prior (the model's prior is on the
        intercept minus it; see ``BayesianGLMBase._fit_model``).

    Returns
    -------
    ParamLayout
        Coefficients ``coef`` (dimension ``feature``), then ``intercept``;
        linear regression with the noise sampled adds ``log_noise_ratio``
        (``log(sigma / s)``, the last column). Multinomial: class-major blocks
        (``theta[k * p1 + j]``, ``p1 = n_features + fit_intercept``), ``coef``
        of dimensions (``class``, ``feature``) and ``intercept`` (``class``).
    """
    p, icpt = model.n_features, bool(model.fit_intercept)
    features = list(range(p)) if feature_names is None else list(feature_names)
    K = getattr(model, "n_classes", None)
    if K is None:
        variables = [("coef", ("feature",), np.arange(p))]
        if icpt:
            variables.append(("intercept", (), np.array(p)))
        if model.n_params > p + icpt:
            variables.append(("log_noise_ratio", (), np.array(model.n_params - 1)))
        means = np.zeros(model.n_params)
        if icpt:
            means[p] = intercept_loc
        return ParamLayout(variables, {"feature": features}, model.prior.scale, means)
    block = p + icpt
    starts = block * np.arange(K)
    variables = [("coef", ("class", "feature"), starts[:, None] + np.arange(p)[None, :])]
    if icpt:
        variables.append(("intercept", ("class",), starts + p))
    labels = list(range(K)) if classes is None else np.asarray(classes).tolist()
    return ParamLayout(variables, {"class": labels, "feature": features}, model.prior.scale)
