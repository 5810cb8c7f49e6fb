{{ 'pins' | module_source }}
