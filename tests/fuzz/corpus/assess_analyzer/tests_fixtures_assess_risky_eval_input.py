def calc():
    expr = input("expression: ")
    return eval(expr)

print(calc())
