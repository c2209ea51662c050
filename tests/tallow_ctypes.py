"""ctypes binding of libtallow's public API for the Python tests.

The build directory comes from $TALLOW_BUILD (set by ctest) or ./build.
Only what the tests need is bound; every call's status is checked and a
failure raises with tl_last_error()'s message."""
import ctypes
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(77)


def load_lib():
    build = os.environ.get("TALLOW_BUILD", os.path.join(ROOT, "build"))
    path = os.path.join(build, "libtallow.so")
    if not os.path.exists(path):
        skip(f"{path} not built")
    lib = ctypes.CDLL(path)
    lib.tl_last_error.restype = ctypes.c_char_p
    lib.tl_model_load.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.tl_model_free.argtypes = [ctypes.c_void_p]
    lib.tl_session_init.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.tl_session_free.argtypes = [ctypes.c_void_p]
    lib.tl_session_eval_all.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32), ctypes.c_int32,
                                        ctypes.POINTER(ctypes.c_float)]
    lib.tl_session_eval.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32), ctypes.c_int32,
                                    ctypes.POINTER(ctypes.POINTER(ctypes.c_float))]
    lib.tl_session_rewind.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    lib.tl_tokenize.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_bool, ctypes.c_bool,
                                ctypes.POINTER(ctypes.c_int32), ctypes.c_int32, ctypes.POINTER(ctypes.c_int32)]
    return lib


class SessionParams(ctypes.Structure):
    _fields_ = [("n_ctx", ctypes.c_int32), ("n_batch", ctypes.c_int32), ("n_threads", ctypes.c_int32)]


class Model:
    def __init__(self, lib, path, n_ctx=512, n_batch=512, n_threads=2):
        self.lib = lib
        self.m = ctypes.c_void_p()
        self._check(lib.tl_model_load(path.encode(), None, ctypes.byref(self.m)))
        sp = SessionParams(n_ctx, n_batch, n_threads)
        self.s = ctypes.c_void_p()
        self._check(lib.tl_session_init(self.m, ctypes.byref(sp), ctypes.byref(self.s)))

    def _check(self, st):
        if st != 0:
            raise RuntimeError(f"tallow status {st}: {self.lib.tl_last_error().decode(errors='replace')}")

    def tokenize(self, text, add_special=True, parse_special=True):
        b = text.encode() if isinstance(text, str) else text
        cap = len(b) + 16
        out = (ctypes.c_int32 * cap)()
        n = ctypes.c_int32()
        self._check(self.lib.tl_tokenize(self.m, b, len(b), add_special, parse_special, out, cap, ctypes.byref(n)))
        return list(out[: n.value])

    def eval_all(self, ids, n_vocab):
        import numpy as np
        arr = (ctypes.c_int32 * len(ids))(*ids)
        out = np.zeros((len(ids), n_vocab), dtype=np.float32)
        self._check(self.lib.tl_session_eval_all(self.s, arr, len(ids),
                                                 out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))))
        return out

    def eval_last(self, ids, n_vocab):
        import numpy as np
        arr = (ctypes.c_int32 * len(ids))(*ids)
        p = ctypes.POINTER(ctypes.c_float)()
        self._check(self.lib.tl_session_eval(self.s, arr, len(ids), ctypes.byref(p)))
        return np.ctypeslib.as_array(p, shape=(n_vocab,)).copy()

    def rewind(self, pos=0):
        self._check(self.lib.tl_session_rewind(self.s, pos))

    def close(self):
        self.lib.tl_session_free(self.s)
        self.lib.tl_model_free(self.m)
