package jsongrammar

// A string format is honoured as a regular expression (as xgrammar
// writes them), anchored, whose strings are valid for the format's RFC
// and for the validators that check formats (Go's net/url and net/netip,
// RFC 3339's date and time rules): a subset of the valid strings where
// the full language is not regular (no February 29th; addresses and
// URIs in a common form), and a length where the format bounds one.

// stringFormat is the pattern and the most characters of a string
// format; false for a format the compiler does not know (an annotation:
// JSON Schema's validators pass unknown formats).
func stringFormat(name string) (pattern string, maxLen int, ok bool) {
	const (
		day4 = `(?:0[1-9]|[12][0-9]|30)`
		day5 = `(?:0[1-9]|[12][0-9]|3[01])`
		feb  = `(?:0[1-9]|1[0-9]|2[0-8])`
		date = `[0-9]{4}-(?:(?:0[13578]|1[02])-` + day5 + `|(?:0[469]|11)-` + day4 + `|02-` + feb + `)`
		hms  = `(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,9})?`
		zone = `(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])`
		// A hostname label: letters, digits and inner hyphens, 1 to 63.
		label    = `[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?`
		hostname = label + `(?:\.` + label + `)*`
		octet    = `(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])`
		ipv4     = octet + `(?:\.` + octet + `){3}`
		hex4     = `[0-9a-fA-F]{1,4}`
		unres    = `A-Za-z0-9._~`
		pct      = `%[0-9A-F]{2}`
		segment  = `(?:[` + unres + `!$&'()*+,;=:@-]|` + pct + `)*`
		query    = `(?:[` + unres + `!$&'()*+,;=:@/?-]|` + pct + `)*`
		uri      = `[a-z][a-z0-9+.-]*://` + hostname + `(?::[0-9]{1,5})?(?:/` + segment + `)*(?:\?` + query + `)?(?:#` + query + `)?`
		pointer  = `(?:/(?:[^~/]|~[01])*)*`
		semverID = `(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)`
	)
	dur := func() string {
		d := `(?:[0-9]+Y(?:[0-9]+M)?(?:[0-9]+D)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)`
		t := `T(?:[0-9]+H(?:[0-9]+M)?(?:[0-9]+S)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)`
		return `P(?:[0-9]+W|` + d + `(?:` + t + `)?|` + t + `)`
	}
	switch name {
	case "date":
		return "^" + date + "$", 0, true
	case "time":
		return "^" + hms + zone + "$", 0, true
	case "date-time":
		return "^" + date + "T" + hms + zone + "$", 0, true
	case "duration":
		return "^" + dur() + "$", 0, true
	case "email", "idn-email":
		local := `[A-Za-z0-9_+-]{1,32}(?:\.[A-Za-z0-9_+-]{1,31})?`
		return "^" + local + "@" + hostname + "$", 254, true
	case "hostname", "idn-hostname":
		return "^" + hostname + "$", 253, true
	case "ipv4":
		return "^" + ipv4 + "$", 0, true
	case "ipv6":
		full := hex4 + `(?::` + hex4 + `){7}`
		head := `::(?:` + hex4 + `(?::` + hex4 + `){0,6})?`
		tail := `(?:` + hex4 + `:){1,7}:`
		return "^(?:" + full + "|" + head + "|" + tail + ")$", 0, true
	case "uuid":
		return `^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`, 0, true
	case "uri", "iri":
		return "^" + uri + "$", 0, true
	case "uri-reference", "iri-reference":
		rel := `/(?:` + segment + `(?:/` + segment + `)*)?`
		return "^(?:" + uri + "|" + rel + ")$", 0, true
	case "uri-template":
		return `^(?:[` + unres + `!$&'()*+,;=@/?-]|\{[A-Za-z0-9_]+\})*$`, 0, true
	case "json-pointer":
		return "^" + pointer + "$", 0, true
	case "relative-json-pointer":
		return `^(?:0|[1-9][0-9]*)(?:#|` + pointer + `)$`, 0, true
	case "regex":
		return `^[A-Za-z0-9 _-]*$`, 0, true
	case "semver":
		core := `(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)`
		pre := `(?:-` + semverID + `(?:\.` + semverID + `)*)?`
		build := `(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?`
		return "^" + core + pre + build + "$", 0, true
	case "byte":
		return `^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$`, 0, true
	}
	return "", 0, false
}

// numberFormat is the range of a number format (OpenAPI's): its bounds
// as JSON numbers, and whether it is an integer's.
func numberFormat(name string) (lo, hi string, integer, ok bool) {
	switch name {
	case "int8":
		return "-128", "127", true, true
	case "int16":
		return "-32768", "32767", true, true
	case "int32":
		return "-2147483648", "2147483647", true, true
	case "int64":
		return "-9223372036854775808", "9223372036854775807", true, true
	case "uint8":
		return "0", "255", true, true
	case "uint16":
		return "0", "65535", true, true
	case "uint32":
		return "0", "4294967295", true, true
	case "uint64":
		return "0", "18446744073709551615", true, true
	}
	return "", "", false, false
}

func isNumberFormat(name string) bool {
	_, _, _, ok := numberFormat(name)
	return ok
}
