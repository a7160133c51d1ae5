"""DLPack helpers shared by test_dlpack.py and test_torch.py (not a test module)."""


def capsule_name(cap):
    from clbound import _dlpack
    return _dlpack._api.PyCapsule_GetName(cap)


class Recorder:
    """Passes __dlpack__ through to obj, recording the keywords and the capsule's name."""

    def __init__(self, obj):
        self.obj, self.kwargs, self.names = obj, [], []

    def __dlpack__(self, **kwargs):
        self.kwargs.append(kwargs)
        cap = self.obj.__dlpack__(**kwargs)
        self.names.append(capsule_name(cap))
        return cap

    def __dlpack_device__(self):
        return self.obj.__dlpack_device__()


class Holder:
    """Hands out a capsule made beforehand (a legacy one, say)."""

    def __init__(self, cap):
        self.cap = cap

    def __dlpack__(self, **kwargs):
        return self.cap
