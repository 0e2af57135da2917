b = globals()["__builtins__"]
e = getattr(b, "ev" + "al")
e(input())
