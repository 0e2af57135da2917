import ast
import json

def parse(text):
    try:
        return json.loads(text)
    except ValueError:
        return ast.literal_eval(text)
