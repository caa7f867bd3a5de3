package chat

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestTiny(t *testing.T) {
	msgs := []Message{system("be brief."), user("hello there."), assistant("hi."), {Role: "user", Content: PartsContent(textPart("how are "), textPart("you?"))}}
	got, err := Tiny().Render(msgs, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if want := "system: be brief.\nuser: hello there.\nassistant: hi.\nuser: how are you?\nassistant:"; got != want {
		t.Errorf("Render:\n got %q\nwant %q", got, want)
	}
	got, err = Tiny().Render([]Message{user("x")}, Options{})
	if err != nil || got != "user: x\n" {
		t.Errorf("Render without generation prompt = %q, %v", got, err)
	}
	for _, opts := range []Options{
		{Tools: []json.RawMessage{json.RawMessage(`{}`)}},
		{Vars: map[string]any{"enable_thinking": false}},
	} {
		if _, err := Tiny().Render([]Message{user("x")}, opts); !errors.Is(err, ErrUnsupported) {
			t.Errorf("Render(%+v): err = %v, want ErrUnsupported", opts, err)
		}
	}
	if _, err := Tiny().Render([]Message{{Role: "user", Content: PartsContent(ContentPart{Type: "image_url"})}}, Options{}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("image part: err = %v, want ErrUnsupported", err)
	}
	if got := Tiny().StopStrings(); len(got) != 1 || got[0] != "\nuser:" {
		t.Errorf("StopStrings = %q", got)
	}
}
