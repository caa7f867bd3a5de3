package caddymlc

import (
	"reflect"
	"testing"
)

// Every option of a model that the routing core has a field for reaches
// the core: a field the adapter forgets is an option the Caddyfile
// accepts and the router ignores.
func TestCoreConfigCarriesEveryOption(t *testing.T) {
	m := ModelConfig{Engine: &EngineProgram{Kind: "builtin"}}
	mv := reflect.ValueOf(&m).Elem()
	core := reflect.TypeOf(m.coreConfig())
	checked := 0
	for i := range core.NumField() {
		name := core.Field(i).Name
		f := mv.FieldByName(name)
		if !f.IsValid() {
			continue // named otherwise in the config (EngineKind: Engine.Kind)
		}
		switch f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Int, reflect.Int64:
			f.SetInt(7)
		case reflect.Float64:
			f.SetFloat(0.5)
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		case reflect.Pointer: // a struct of options, on when its switches are
			p := reflect.New(f.Type().Elem())
			for j := range p.Elem().NumField() {
				if sw := p.Elem().Field(j); sw.Kind() == reflect.Bool {
					sw.SetBool(true)
				}
			}
			f.Set(p)
		default:
			t.Fatalf("%s: a %s; teach the test to set it", name, f.Kind())
		}
		checked++
	}
	got := reflect.ValueOf(m.coreConfig())
	for i := range core.NumField() {
		name := core.Field(i).Name
		if mv.FieldByName(name).IsValid() && got.Field(i).IsZero() {
			t.Errorf("coreConfig drops %s", name)
		}
	}
	if checked < 10 {
		t.Fatalf("only %d fields checked", checked)
	}
}
