// Extracts the data of Gateway API v1.3.0's conformance tests (sigs.k8s.io/gateway-api/conformance/tests/*.go)
// into JSON, by reading their Go source (go/ast), not by running them: per test its ShortName, Features and
// Manifests, every `http.ExpectedResponse` / `grpc.ExpectedResponse` literal in its Test function (the requests
// and expected answers), and every call to the conformance `kubernetes.*` status helpers with its arguments
// (route and gateway names, expected conditions). Identifiers bound by `x := <literal>` in the Test function and
// the string constants of the Gateway API packages (v1.RouteConditionAccepted → "Accepted") are resolved; what
// cannot be resolved is kept as {"$expr": "<source>"} so the runner can tell it did not understand it.
//
// Usage: go run ./extract <gateway-api module dir> > cases.json
package main

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

var fset = token.NewFileSet()

// consts: "v1.RouteConditionAccepted"-style selectors → string value, from the API packages' const blocks.
var consts = map[string]any{
	"metav1.ConditionTrue": "True", "metav1.ConditionFalse": "False", "metav1.ConditionUnknown": "Unknown",
	"codes.OK": 0, "codes.Unimplemented": 12, "codes.NotFound": 5,
	"(*v1.Group)(&v1.GroupVersion.Group)": "gateway.networking.k8s.io",
	// the controller name the implementation gives the suite: a marker the runner replaces with its controller
	"suite.ControllerName": map[string]any{"$suite": "ControllerName"},
}

// funcs: the helper functions the tests' files declare (package tests), by name: a call to one whose body is
// bindings and a return is evaluated (parentRefTo); a call statement to another is recorded for the runner
// (setupEndpointSlices), which does what it does or says it cannot.
var funcs = map[string]*ast.FuncDecl{}

func loadConsts(dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			continue
		}
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						if b, ok := vs.Values[i].(*ast.BasicLit); ok && b.Kind == token.STRING {
							v, _ := strconv.Unquote(b.Value)
							consts[n.Name] = v
						}
					}
				}
			}
		}
	}
}

func src(e ast.Node) string {
	var b strings.Builder
	printer.Fprint(&b, fset, e)
	return b.String()
}

type env map[string]any

func eval(e ast.Expr, vars env) any {
	switch x := e.(type) {
	case *ast.BasicLit:
		switch x.Kind {
		case token.STRING:
			v, _ := strconv.Unquote(x.Value)
			return v
		case token.INT:
			v, _ := strconv.Atoi(x.Value)
			return v
		}
	case *ast.Ident:
		switch x.Name {
		case "true":
			return true
		case "false":
			return false
		case "nil":
			return nil
		}
		if v, ok := vars[x.Name]; ok {
			return v
		}
	case *ast.SelectorExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			// a field of a bound struct literal: `tc.gatewayNamespacedName` in a range over the test's table
			if obj, ok := vars[id.Name].(map[string]any); ok {
				if v, ok := obj[x.Sel.Name]; ok {
					return v
				}
				// a field the literal leaves out has its type's zero value
				if t, ok := obj["$type"].(string); ok && strings.HasPrefix(t, "struct") {
					if m := regexp.MustCompile(`\b` + x.Sel.Name + `\s+(\w+)`).FindStringSubmatch(t); m != nil {
						switch m[1] {
						case "string":
							return ""
						case "int", "int32", "int64":
							return 0
						case "bool":
							return false
						}
					}
				}
			}
			if v, ok := consts[src(x)]; ok {
				return v
			}
			if v, ok := consts[x.Sel.Name]; ok {
				return v
			}
			if id := x.X.(*ast.Ident); id.Name == "features" {
				return x.Sel.Name
			}
		}
	case *ast.UnaryExpr:
		if x.Op == token.AND {
			return eval(x.X, vars)
		}
	case *ast.ParenExpr:
		return eval(x.X, vars)
	case *ast.BinaryExpr:
		if x.Op == token.ADD {
			a, b := eval(x.X, vars), eval(x.Y, vars)
			if as, ok := a.(string); ok {
				if bs, ok := b.(string); ok {
					return as + bs
				}
			}
		}
	case *ast.CallExpr:
		fn := src(x.Fun)
		// conversions and pointer helpers keep their argument's value
		if len(x.Args) == 1 && (fn == "string" || fn == "int32" || fn == "int" || strings.HasSuffix(fn, "ptr.To") ||
			strings.HasPrefix(fn, "v1.") || strings.HasPrefix(fn, "gatewayv1.") || strings.HasPrefix(fn, "v1beta1.") ||
			strings.HasPrefix(fn, "v1alpha2.") || strings.HasPrefix(fn, "features.") || fn == "gatewayv1.SectionName" || fn == "time.Duration") {
			return eval(x.Args[0], vars)
		}
		// make([]T, 0, n): an empty list that appends fill
		if fn == "make" && len(x.Args) >= 1 {
			if _, ok := x.Args[0].(*ast.ArrayType); ok {
				return []any{}
			}
		}
		// append(list, a, b) and append(list, other...) of lists known here
		if fn == "append" && len(x.Args) >= 1 {
			if base, ok := eval(x.Args[0], vars).([]any); ok {
				out := append([]any{}, base...)
				for i, a := range x.Args[1:] {
					v := eval(a, vars)
					if x.Ellipsis.IsValid() && i == len(x.Args)-2 {
						more, ok := v.([]any)
						if !ok {
							return map[string]any{"$expr": src(e)}
						}
						out = append(out, more...)
					} else {
						out = append(out, v)
					}
				}
				return out
			}
		}
		if v, ok := callLocal(x, vars); ok {
			return v
		}
		if strings.HasSuffix(fn, "NewGatewayRef") && len(x.Args) >= 1 {
			ref := map[string]any{"$type": "GatewayRef", "gateway": eval(x.Args[0], vars)}
			if len(x.Args) > 1 {
				var ls []any
				for _, a := range x.Args[1:] {
					ls = append(ls, eval(a, vars))
				}
				ref["listeners"] = ls
			}
			return ref
		}
	case *ast.CompositeLit:
		return composite(x, vars)
	}
	if v, ok := consts[src(e)]; ok {
		return v
	}
	return map[string]any{"$expr": src(e)}
}

// callLocal evaluates a call to a helper of the tests' files whose body is only bindings and one return
// (parentRefTo): its parameters bound to the arguments' values, by its Go definition.
func callLocal(x *ast.CallExpr, vars env) (any, bool) {
	id, ok := x.Fun.(*ast.Ident)
	if !ok {
		return nil, false
	}
	decl, ok := funcs[id.Name]
	if !ok || decl.Body == nil {
		return nil, false
	}
	scope := env{}
	i := 0
	for _, f := range decl.Type.Params.List {
		for _, n := range f.Names {
			if i >= len(x.Args) {
				return nil, false
			}
			scope[n.Name] = eval(x.Args[i], vars)
			i++
		}
	}
	for _, st := range decl.Body.List {
		switch s := st.(type) {
		case *ast.DeclStmt:
			g, ok := s.Decl.(*ast.GenDecl)
			if !ok {
				return nil, false
			}
			for _, sp := range g.Specs {
				vs, ok := sp.(*ast.ValueSpec)
				if !ok {
					return nil, false
				}
				for j, n := range vs.Names {
					if j < len(vs.Values) {
						scope[n.Name] = eval(vs.Values[j], scope)
					}
				}
			}
		case *ast.AssignStmt:
			for j, l := range s.Lhs {
				if n, ok := l.(*ast.Ident); ok && j < len(s.Rhs) {
					scope[n.Name] = eval(s.Rhs[j], scope)
				}
			}
		case *ast.ReturnStmt:
			if len(s.Results) != 1 {
				return nil, false
			}
			return eval(s.Results[0], scope), true
		default:
			return nil, false
		}
	}
	return nil, false
}

func composite(x *ast.CompositeLit, vars env) any {
	typ := ""
	if x.Type != nil {
		typ = src(x.Type)
	}
	if strings.HasPrefix(typ, "[]") || (x.Type == nil && len(x.Elts) > 0 && !isKV(x.Elts[0])) {
		out := []any{}
		for _, el := range x.Elts {
			if c, ok := el.(*ast.CompositeLit); ok && c.Type == nil {
				c.Type = elemType(typ)
			}
			out = append(out, eval(el, vars))
		}
		return out
	}
	obj := map[string]any{}
	if typ != "" && !strings.HasPrefix(typ, "map[") {
		obj["$type"] = typ
	}
	for _, el := range x.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		key := ""
		if id, ok := kv.Key.(*ast.Ident); ok && !strings.HasPrefix(typ, "map[") {
			key = id.Name
		} else {
			k := eval(kv.Key, vars)
			if s, ok := k.(string); ok {
				key = s
			} else {
				key = src(kv.Key)
			}
		}
		obj[key] = eval(kv.Value, vars)
	}
	return obj
}

func isKV(e ast.Expr) bool { _, ok := e.(*ast.KeyValueExpr); return ok }

func elemType(slice string) ast.Expr {
	if !strings.HasPrefix(slice, "[]") {
		return nil
	}
	return ast.NewIdent(strings.TrimPrefix(slice, "[]"))
}

type testCase struct {
	File      string           `json:"file"`
	ShortName string           `json:"shortName"`
	Features  any              `json:"features"`
	Manifests any              `json:"manifests"`
	Responses []any            `json:"responses"`
	Calls     []map[string]any `json:"calls"`
}

func main() {
	mod := os.Args[1]
	for _, p := range []string{"apis/v1", "apis/v1beta1", "apis/v1alpha2", "apis/v1alpha3"} {
		loadConsts(filepath.Join(mod, p))
	}
	files, _ := filepath.Glob(filepath.Join(mod, "conformance/tests/*.go"))
	parsed := map[string]*ast.File{}
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			panic(err)
		}
		parsed[f] = file
		for _, d := range file.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
				funcs[fd.Name.Name] = fd
			}
		}
	}
	out := []testCase{}
	for _, f := range files {
		file := parsed[f]
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				if len(vs.Values) != 1 {
					continue
				}
				lit, ok := vs.Values[0].(*ast.CompositeLit)
				if !ok || src(lit.Type) != "suite.ConformanceTest" {
					continue
				}
				out = append(out, extract(filepath.Base(f), lit))
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ShortName < out[j].ShortName })
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		panic(err)
	}
}

func extract(file string, lit *ast.CompositeLit) testCase {
	tc := testCase{File: file, Responses: []any{}, Calls: []map[string]any{}}
	vars := env{}
	for _, el := range lit.Elts {
		kv := el.(*ast.KeyValueExpr)
		switch kv.Key.(*ast.Ident).Name {
		case "ShortName":
			tc.ShortName, _ = eval(kv.Value, vars).(string)
		case "Features":
			tc.Features = eval(kv.Value, vars)
		case "Manifests":
			tc.Manifests = eval(kv.Value, vars)
		case "Test":
			if fn, ok := kv.Value.(*ast.FuncLit); ok {
				walk(fn.Body, vars, &tc)
			}
		}
	}
	return tc
}

// walk records the status calls and expected responses under n, with the identifiers bound in its scopes: a block
// scopes its bindings, a range over a known list runs its body once per element, and `gwAddr := kubernetes.
// Gateway…MustBeAccepted(…)` makes that Gateway the one the following responses are sent to ("$gateway").
func walk(n ast.Node, vars env, tc *testCase) {
	ast.Inspect(n, func(c ast.Node) bool {
		switch x := c.(type) {
		case *ast.BlockStmt:
			scoped := env{}
			for k, v := range vars {
				scoped[k] = v
			}
			for _, st := range x.List {
				walk(st, scoped, tc)
			}
			return false
		case *ast.AssignStmt:
			for _, r := range x.Rhs {
				walk(r, vars, tc)
			}
			if len(x.Lhs) == len(x.Rhs) {
				for i, l := range x.Lhs {
					bind(l, x.Rhs[i], vars)
				}
			}
			return false
		case *ast.ValueSpec:
			for _, r := range x.Values {
				walk(r, vars, tc)
			}
			for i, name := range x.Names {
				if i < len(x.Values) {
					bind(name, x.Values[i], vars)
				} else if _, isSlice := x.Type.(*ast.ArrayType); isSlice {
					vars[name.Name] = []any{} // `var testCases []T`: nil, which append fills
				}
			}
			return false
		case *ast.RangeStmt:
			list, ok := eval(x.X, vars).([]any)
			id, isID := x.Value.(*ast.Ident)
			if !ok || !isID {
				walk(x.Body, vars, tc)
				return false
			}
			for _, el := range list {
				scoped := env{}
				for k, v := range vars {
					scoped[k] = v
				}
				scoped[id.Name] = el
				walk(x.Body, scoped, tc)
			}
			return false
		case *ast.CompositeLit:
			t := ""
			if x.Type != nil {
				t = src(x.Type)
			}
			if strings.HasPrefix(t, "[]") {
				for _, el := range x.Elts { // elided element types: `[]T{{…}, {…}}`
					if c, ok := el.(*ast.CompositeLit); ok && c.Type == nil {
						c.Type = elemType(t)
					}
				}
			}
			if strings.HasSuffix(t, "ExpectedResponse") && !strings.HasPrefix(t, "[]") {
				r := composite(x, vars).(map[string]any)
				if g, ok := vars["$gateway"]; ok {
					r["$gateway"] = g
				}
				tc.Responses = append(tc.Responses, r)
				return false
			}
		case *ast.CallExpr:
			// suite.Client.Delete(ctx, &obj): an object removed before the responses that follow
			if strings.HasSuffix(src(x.Fun), "Client.Delete") && len(x.Args) == 2 {
				tc.Calls = append(tc.Calls, map[string]any{"fn": "Delete", "args": []any{eval(x.Args[1], vars)}, "beforeResponse": len(tc.Responses)})
				return false
			}
			// a call to a helper of the tests' files that is not a value (setupEndpointSlices): recorded, "local"
			if id, ok := x.Fun.(*ast.Ident); ok && funcs[id.Name] != nil {
				if _, isValue := callLocal(x, vars); !isValue {
					tc.Calls = append(tc.Calls, map[string]any{"fn": id.Name, "local": true, "args": callArgs(x, vars), "beforeResponse": len(tc.Responses)})
					return false
				}
			}
			if sel, ok := x.Fun.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "kubernetes" && sel.Sel.Name != "NewGatewayRef" {
					tc.Calls = append(tc.Calls, map[string]any{"fn": sel.Sel.Name, "args": callArgs(x, vars)})
				}
			}
		}
		return true
	})
}

// callArgs: a call's arguments but the test's t and the suite's client, timeouts and controller name
func callArgs(x *ast.CallExpr, vars env) []any {
	args := []any{}
	for _, a := range x.Args {
		s := src(a)
		if strings.HasPrefix(s, "suite.") || strings.HasPrefix(s, "s.") || s == "t" {
			continue
		}
		args = append(args, eval(a, vars))
	}
	return args
}

// bind records `name := value`; a Gateway's address (the result of a …MustBeAccepted call) names its Gateway.
func bind(l ast.Expr, r ast.Expr, vars env) {
	id, ok := l.(*ast.Ident)
	if !ok || id.Name == "_" {
		return
	}
	if call, ok := r.(*ast.CallExpr); ok && strings.HasSuffix(src(call.Fun), "MustBeAccepted") {
		for _, a := range call.Args {
			if ref, ok := eval(a, vars).(map[string]any); ok && ref["$type"] == "GatewayRef" {
				vars[id.Name] = ref
				vars["$gateway"] = ref
				return
			}
		}
	}
	vars[id.Name] = eval(r, vars)
}
