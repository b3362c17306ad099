import { describe, expect, it } from "vitest";

import { checkValue, parseTheme, ThemeError, type ThemeField } from "./theme.js";

describe("parseTheme (lenient)", () => {
  it("reads the aliases and fills in the defaults", () => {
    const theme = parseTheme(
      JSON.stringify({
        surface: "admin",
        templates: [
          { key: "home", extends: "layout", unknown: 1 },
          {
            id: "layout",
            templatePath: "views/surface/layout.njk",
            priority: "7",
            isActive: false,
            scope: "tenant",
          },
          { templateKey: "home", displayName: "a duplicate is ignored" },
          { displayName: "no key: ignored" },
          "not an object",
        ],
        config: {
          fields: {
            title: { description: "Shown on top", defaultValue: "Hi", tab: "Content" },
            accent: { type: "Color", value: "#fff", section: "Look", order: 2 },
            size: { type: "number", value: 3, group: "Look", order: 1 },
            mode: { type: "select", options: ["a", { value: "b" }, { label: "no value" }] },
            "bad key!": { label: "ignored" },
          },
        },
        somethingElse: true,
      }),
    );
    expect(theme.surface).toBe("admin");
    expect(theme.definitions).toEqual([
      {
        templateKey: "home",
        displayName: "home",
        templatePath: "views/surface/home.html",
        parentTemplateKey: "layout",
        surface: "admin",
        scope: "workspace",
        isActive: true,
        priority: 100,
      },
      {
        templateKey: "layout",
        displayName: "layout",
        templatePath: "views/surface/layout.njk",
        parentTemplateKey: null,
        surface: "admin",
        scope: "tenant",
        isActive: false,
        priority: 7,
      },
    ]);
    expect(theme.fields.map((f) => f.key)).toEqual(["mode", "title", "size", "accent"]);
    expect(theme.fields.find((f) => f.key === "title")).toEqual({
      key: "title",
      label: "title",
      type: "text",
      helpText: "Shown on top",
      value: "Hi",
      required: false,
      group: "Content",
      options: [],
      order: 0,
    });
    expect(theme.fields.find((f) => f.key === "size")?.value).toBe("3");
    expect(theme.fields.find((f) => f.key === "accent")).toMatchObject({ type: "color", group: "Look" });
    expect(theme.fields.find((f) => f.key === "mode")?.options).toEqual(["a", "b"]);
  });

  it("keeps a template path inside the package", () => {
    const theme = parseTheme(
      JSON.stringify({
        definitions: [
          { templateKey: "x", templatePath: "../../etc/passwd" },
          { templateKey: "y", templatePath: "/abs.njk" },
        ],
      }),
    );
    expect(theme.definitions.map((d) => d.templatePath)).toEqual([
      "views/surface/x.html",
      "views/surface/y.html",
    ]);
  });

  it("refuses only text that is not a JSON object", () => {
    expect(() => parseTheme("{ not json")).toThrow(ThemeError);
    expect(() => parseTheme("[]")).toThrow(/not a JSON object/);
    expect(parseTheme("{}")).toEqual({ surface: "workspace", definitions: [], fields: [] });
  });
});

describe("checkValue", () => {
  const field = (type: string, extra: Partial<ThemeField> = {}): ThemeField => ({
    key: "k",
    label: "k",
    type,
    helpText: null,
    value: null,
    required: false,
    group: null,
    options: [],
    order: 0,
    ...extra,
  });

  it("checks each type", () => {
    expect(checkValue(field("color"), "#a1b2c3")).toBeNull();
    expect(checkValue(field("color"), "#abc")).toBeNull();
    expect(checkValue(field("color"), "#a1b2c3d4")).toBeNull();
    // The message lists every form the check accepts, and only those.
    expect(checkValue(field("color"), "red")).toBe("is not a colour (#rgb, #rrggbb or #rrggbbaa)");
    expect(checkValue(field("color"), "#a1b2c")).toMatch(/colour/);
    expect(checkValue(field("number"), "12.5")).toBeNull();
    expect(checkValue(field("number"), "twelve")).toMatch(/number/);
    expect(checkValue(field("boolean"), "true")).toBeNull();
    expect(checkValue(field("boolean"), "yes")).toMatch(/true or false/);
    expect(checkValue(field("select", { options: ["a", "b"] }), "b")).toBeNull();
    expect(checkValue(field("select", { options: ["a", "b"] }), "c")).toMatch(/one of a, b/);
    expect(checkValue(field("url"), "https://example.com/x")).toBeNull();
    expect(checkValue(field("url"), "javascript:alert(1)")).toMatch(/http/);
    expect(checkValue(field("text"), "x".repeat(2_001))).toMatch(/longer/);
    expect(checkValue(field("text", { required: true }), " ")).toMatch(/required/);
    expect(checkValue(field("color"), "")).toBeNull();
  });
});
