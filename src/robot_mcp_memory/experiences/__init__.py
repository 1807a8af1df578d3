"""The experience memory (robotmem-compatible): facts and perceptions, sessions, tags.

``model`` values and limits · ``classify`` category/tags/confidence by rules · ``dedup`` exact →
lexical → semantic, numbers and outcomes decide · ``filters`` context_filter → SQL ·
``consolidate`` end-of-session merging · ``storage`` tables and SQL · ``service`` the use cases.
"""
